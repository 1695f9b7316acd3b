#! --train -D B=1 -D T=4 -D C=8 -D H=2 -D F=12
#! file ../../examples/llama_layer.tf
# the backward of examples/llama_layer.tf: the forward and backward graphs and their kernels
