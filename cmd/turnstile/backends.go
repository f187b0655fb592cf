package main

// Backend packages register their URL schemes with turnstile.Open when
// imported; these blank imports are what make a scheme usable from the
// command line. mem:// is built into turnstile itself.
import (
	_ "github.com/turnstilelock/turnstile/etcd"
	_ "github.com/turnstilelock/turnstile/fallback"
	_ "github.com/turnstilelock/turnstile/mysql"
	_ "github.com/turnstilelock/turnstile/postgres"
	_ "github.com/turnstilelock/turnstile/redis"
	_ "github.com/turnstilelock/turnstile/redlock"
	_ "github.com/turnstilelock/turnstile/service/remote"
	_ "github.com/turnstilelock/turnstile/zookeeper"
)
