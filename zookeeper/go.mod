module github.com/turnstilelock/turnstile/zookeeper

go 1.26

require github.com/turnstilelock/turnstile v0.1.0

require go.uber.org/goleak v1.3.0 // indirect
