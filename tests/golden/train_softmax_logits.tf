#! --train -D B=2 -D V=10
#! file ../../examples/softmax_logits.tf
# the backward of examples/softmax_logits.tf: the forward and backward graphs and their kernels
