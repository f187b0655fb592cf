module github.com/turnstilelock/turnstile/cmd/turnstile

go 1.26.0

require (
	github.com/turnstilelock/turnstile v0.0.0
	github.com/turnstilelock/turnstile/redis v0.0.0
)

require (
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.48.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/redis/go-redis/v9 v9.23.0 // indirect
	github.com/redis/rueidis v1.0.79 // indirect
	go.uber.org/atomic v1.12.0 // indirect
)

replace (
	github.com/turnstilelock/turnstile => ../../
	github.com/turnstilelock/turnstile/redis => ../../redis
)
