/* placeholder */ typedef int fusec_placeholder_llvm;
