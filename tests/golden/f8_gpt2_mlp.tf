#! --precision f8 -D B=1 -D T=4 -D C=8
#! file ../../examples/gpt2_mlp.tf
# examples/gpt2_mlp.tf at --precision f8 (docs/precision.md, "f8"): the interface bf16, every
# intermediate E4M3 with an f8 slot of its own (fp8_scale, fp8_quant where it is made, fp8_dequant
# in each reader's kernel); the kernel IR reads each slot's scale from the state buffer, records
# the amax where it quantizes (amax), and starts with the fp8_update kernel.
