package disks

// SetStepHook installs the test hook called at every step of a move.
func SetStepHook(c *Config, f func(string)) { c.step = f }
