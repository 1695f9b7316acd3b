#! --precision bf16 -D B=1 -D T=4 -D C=8 -D H=2
#! file ../../examples/gpt2_block.tf
# examples/gpt2_block.tf at --precision bf16 (docs/precision.md): inputs, weights and every
# activation between kernels bf16; the layernorms', softmax's and the attention's arithmetic f32
# (the composites widen their inputs), their results cast to bf16 once, in the kernel that makes them.
