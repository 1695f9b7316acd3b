#! -D B=2 -D T=3 -D C=8
#! file ../../examples/quant_mlp.tf
# weight-only int8: i8 weights loaded as one byte, converted to f32 and scaled in a kernel of
# their own before each library product (the dequantized weight is written once)
