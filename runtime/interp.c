/* placeholder */ typedef int fusec_placeholder_interp;
