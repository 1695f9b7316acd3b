dim N = 4
const c = 2
