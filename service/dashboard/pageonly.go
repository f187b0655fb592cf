package dashboard

import (
	"net/http"

	"github.com/turnstilelock/turnstile/service/gen/turnstile/v1/turnstilev1connect"
)

// lockCalls are the API's calls that take, renew or release a lock: the
// page makes none of them.
var lockCalls = []string{
	turnstilev1connect.LocksTryAcquireProcedure, turnstilev1connect.LocksAcquireProcedure,
	turnstilev1connect.LocksQueueProcedure, turnstilev1connect.LocksExtendProcedure,
	turnstilev1connect.LocksReleaseProcedure, turnstilev1connect.LocksHoldProcedure,
	turnstilev1connect.LocksBatchProcedure,
	turnstilev1connect.ElectionsCampaignProcedure, turnstilev1connect.ElectionsResignProcedure,
}

// RefuseLockCalls adds to extra (paths beside the API, which take
// precedence over it) a refusal of every call that takes, renews or
// releases a lock, so that an instance serving the page alone
// ("turnstile dashboard") is no lock service: the page's reads and
// force unlock remain.
func RefuseLockCalls(extra map[string]http.Handler) map[string]http.Handler {
	if extra == nil {
		extra = map[string]http.Handler{}
	}
	refuse := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"code":"unimplemented","message":"this instance serves the operator page only: it takes no locks"}` + "\n"))
	})
	for _, p := range lockCalls {
		extra[p] = refuse
	}
	return extra
}
