module github.com/turnstilelock/turnstile/mysql

go 1.26

require (
	github.com/go-sql-driver/mysql v1.10.1
	github.com/turnstilelock/turnstile v0.1.0
)

require (
	filippo.io/edwards25519 v1.2.0 // indirect
	go.uber.org/goleak v1.3.0 // indirect
)
