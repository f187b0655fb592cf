module github.com/turnstilelock/turnstile/zookeeper

go 1.26

require (
	github.com/go-zookeeper/zk v1.0.4
	github.com/turnstilelock/turnstile v0.1.0
)

require go.uber.org/goleak v1.3.0 // indirect
