#! --precision f8 -D N=4 -D C=8
#! file ../../examples/residual_ln_gelu.tf
# examples/residual_ln_gelu.tf at --precision f8: the residual sum r is an fp8_quant that the
# layernorm reduces; its row is kept (lower.c keep_row, quant_under): quantized, its amax recorded
# and stored once, the later passes and the store of r reading it back.
