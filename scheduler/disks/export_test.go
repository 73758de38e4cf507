package disks

// SetStepHook installs the test hook called at every step of a move.
func SetStepHook(c *Config, f func(string)) { c.step = f }

// SetRoot makes the mount check take root for the root filesystem.
func SetRoot(c *Config, root string) { c.root = root }
