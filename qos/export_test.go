package qos

// NewLimiterOn is NewLimiter on a test's clock.
func newLimiterOn(c clock, bytesPerSecond int64) *Limiter { return newLimiter(nil, c, bytesPerSecond) }
