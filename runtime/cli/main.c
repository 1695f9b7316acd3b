/* placeholder: the fusec driver */
#include "fusec.h"
#include <stdio.h>
int main(void) { puts(fc_version()); return 0; }
