#! --train -D B=1 -D T=4 -D C=8 -D H=2
#! file ../../examples/gpt2_block.tf
# the backward of examples/gpt2_block.tf: the forward and backward graphs and their kernels
