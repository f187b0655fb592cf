module github.com/turnstilelock/turnstile/admission

go 1.26.0

require (
	github.com/redis/rueidis v1.0.79
	github.com/turnstilelock/turnstile v0.1.0
	go.uber.org/goleak v1.3.0
	golang.org/x/time v0.16.0
)

require golang.org/x/sys v0.47.0 // indirect
