package main

// Backend packages register their URL schemes with turnstile.Open when
// imported; these blank imports are what make a scheme usable from the
// command line. mem:// is built into turnstile itself.
import (
	_ "github.com/turnstilelock/turnstile/redis"
)
