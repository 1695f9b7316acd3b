block f(x: f32[4]) {
		y =	x +	q
		return y
}
