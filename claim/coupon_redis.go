package claim

import (
	"context"
	_ "embed" // the Lua script
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
	"github.com/turnstilelock/turnstile"
)

var (
	//go:embed redeem.lua
	redeemLua string
	// A Lua value only holds the source and its SHA-1; Exec sends EVALSHA
	// and falls back to EVAL when the server lost its script cache.
	redeemScript = rueidis.NewLuaScript(redeemLua)
)

// RedisCoupons keeps each coupon in a Redis hash named prefix:code, with
// the fields issued, by and at. A redemption is one short script
// (redeem.lua) and one round trip: it reads the hash and, if the coupon is
// unused, writes who redeemed it and when, by the server's clock.
//
// Each coupon is a key of its own, so on a Redis Cluster the coupons of
// one set spread over the nodes. What Redis keeps is as durable as its
// persistence: a redemption acknowledged just before a failover to a
// replica that had not received it is lost, and the coupon can be
// redeemed again. Where that matters, keep coupons in a database.
//
// A RedisCoupons is safe for concurrent use.
type RedisCoupons struct {
	client rueidis.Client
	prefix string
}

// NewRedisCoupons returns the coupons under prefix. The caller keeps
// owning client.
func NewRedisCoupons(client rueidis.Client, prefix string) (*RedisCoupons, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: nil rueidis client", turnstile.ErrInvalidOption)
	}
	if err := checkName("coupon key prefix", prefix); err != nil {
		return nil, err
	}
	return &RedisCoupons{client: client, prefix: prefix}, nil
}

// Key is the name of code's hash.
func (c *RedisCoupons) Key(code string) string { return c.prefix + ":" + code }

// Issue implements Coupons.Issue: one HSETNX per code, sent in pipelines
// of up to 500.
func (c *RedisCoupons) Issue(ctx context.Context, codes ...string) (int, error) {
	if err := checkCodes(codes); err != nil {
		return 0, err
	}
	issued := 0
	for start := 0; start < len(codes); start += issueChunk {
		chunk := codes[start:min(start+issueChunk, len(codes))]
		cmds := make(rueidis.Commands, len(chunk))
		for i, code := range chunk {
			cmds[i] = c.client.B().Hsetnx().Key(c.Key(code)).Field("issued").Value("1").Build()
		}
		for i, r := range c.client.DoMulti(ctx, cmds...) {
			n, err := r.AsInt64()
			if err != nil {
				return issued, fmt.Errorf("claim: issue coupon %q: %w", chunk[i], err)
			}
			issued += int(n)
		}
	}
	return issued, nil
}

// Redeem implements Coupons.Redeem.
func (c *RedisCoupons) Redeem(ctx context.Context, code, redeemer string) (Redemption, error) {
	if err := checkName("coupon code", code); err != nil {
		return Redemption{}, err
	}
	if err := checkName("redeemer", redeemer); err != nil {
		return Redemption{}, err
	}
	reply, err := redeemScript.Exec(ctx, c.client, []string{c.Key(code)}, []string{redeemer}).ToArray()
	if err != nil {
		return Redemption{}, fmt.Errorf("claim: redeem %q: %w", code, err)
	}
	outcome, by, at, err := readRedeemReply(reply)
	if err != nil {
		return Redemption{}, fmt.Errorf("claim: redeem %q: %w", code, err)
	}
	switch outcome {
	case 0:
		return Redemption{}, fmt.Errorf("%w: %q", ErrUnknownCode, code)
	case 2:
		return Redemption{Code: code, By: by, At: at}, nil
	default:
		return redeemed(code, redeemer, by, at)
	}
}

// readRedeemReply reads redeem.lua's reply.
func readRedeemReply(reply []rueidis.RedisMessage) (outcome int64, by string, at time.Time, err error) {
	if len(reply) == 0 {
		return 0, "", time.Time{}, fmt.Errorf("empty reply from the redeem script")
	}
	if outcome, err = reply[0].AsInt64(); err != nil {
		return 0, "", time.Time{}, err
	}
	if outcome == 0 {
		return 0, "", time.Time{}, nil
	}
	if len(reply) != 3 {
		return 0, "", time.Time{}, fmt.Errorf("reply of %d elements from the redeem script, want 3", len(reply))
	}
	if by, err = reply[1].ToString(); err != nil {
		return 0, "", time.Time{}, err
	}
	raw, err := reply[2].ToString()
	if err != nil {
		return 0, "", time.Time{}, err
	}
	us, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return 0, "", time.Time{}, fmt.Errorf("redemption time %q: %w", raw, err)
	}
	return outcome, by, time.UnixMicro(us), nil
}

// Lookup implements Coupons.Lookup.
func (c *RedisCoupons) Lookup(ctx context.Context, code string) (Coupon, error) {
	if err := checkName("coupon code", code); err != nil {
		return Coupon{}, err
	}
	vals, err := c.client.Do(ctx, c.client.B().Hmget().Key(c.Key(code)).Field("issued", "by", "at").Build()).ToArray()
	if err != nil {
		return Coupon{}, fmt.Errorf("claim: look up coupon %q: %w", code, err)
	}
	if len(vals) != 3 || vals[0].IsNil() {
		return Coupon{}, fmt.Errorf("%w: %q", ErrUnknownCode, code)
	}
	cp := Coupon{Code: code}
	if vals[1].IsNil() {
		return cp, nil
	}
	cp.Used = true
	if cp.By, err = vals[1].ToString(); err != nil {
		return Coupon{}, fmt.Errorf("claim: look up coupon %q: %w", code, err)
	}
	raw, _ := vals[2].ToString()
	us, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return Coupon{}, fmt.Errorf("claim: look up coupon %q: redemption time %q: %w", code, raw, err)
	}
	cp.At = time.UnixMicro(us)
	return cp, nil
}
