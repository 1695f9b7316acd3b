#! --train -D N=3 -D C=8
#! file ../../examples/residual_ln_gelu.tf
# the backward of examples/residual_ln_gelu.tf: the forward and backward graphs and their kernels
