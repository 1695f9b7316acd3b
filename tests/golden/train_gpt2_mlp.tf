#! --train -D B=1 -D T=2 -D C=8
#! file ../../examples/gpt2_mlp.tf
# the backward of examples/gpt2_mlp.tf: the forward and backward graphs and their kernels
