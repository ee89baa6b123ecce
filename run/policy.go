package run

import (
	"encoding/json"

	"github.com/d10ffeed/corral/event"
	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
)

// policyNotice returns, as the run record keeps it (JSON, see
// store.Run.PolicyUnenforced), the rules of def's policy that h cannot
// enforce for req; "" when it enforces them all. It depends only on the
// harness, the definition and the request, and is computed once, at
// start: every driver of the run reads it from the record. extra are
// further rules (brokered secrets that fall back to the environment).
func policyNotice(h harness.Harness, def *sandbox.Definition, req StartRequest, extra []event.UnenforcedRule) string {
	var scripts map[string]string
	if def.Workspace != nil {
		scripts = def.Workspace.Scripts
	}
	cut := def.Policy.NetworkMode() == sandbox.NetworkDeny && def.Provider != nil && def.Provider.Capabilities().NetworkPolicy
	rules := append(harness.UnenforcedRules(h, harness.Request{Policy: def.Policy, Scripts: scripts, Args: req.Args, Auth: req.Auth, Options: req.Options}, cut), extra...)
	if len(rules) == 0 {
		return ""
	}
	b, err := json.Marshal(rules)
	if err != nil {
		return ""
	}
	return string(b)
}

// PolicyNotice returns the policy.unenforced notice of a run from its
// record, or false when its harness enforces the run's whole policy.
func PolicyNotice(rec store.Run) (event.PolicyNotice, bool) {
	if rec.PolicyUnenforced == "" {
		return event.PolicyNotice{}, false
	}
	var rules []event.UnenforcedRule
	if err := json.Unmarshal([]byte(rec.PolicyUnenforced), &rules); err != nil || len(rules) == 0 {
		return event.PolicyNotice{}, false
	}
	return event.PolicyNotice{Harness: rec.Harness, Rules: rules}, true
}

// noticeTranslator opens the run with the harness's events and then the
// run's policy.unenforced event. The notice comes from the run record,
// so a fresh start and every takeover (which replays Begin) produce the
// same events.
type noticeTranslator struct {
	harness.Translator
	notice event.Event
}

// withPolicyNotice wraps tr when the run's record holds a policy notice.
func withPolicyNotice(rec store.Run, tr harness.Translator) harness.Translator {
	n, ok := PolicyNotice(rec)
	if !ok {
		return tr
	}
	return &noticeTranslator{Translator: tr, notice: event.CustomEvent(event.PolicyUnenforced, n)}
}

func (t *noticeTranslator) Begin() []event.Event {
	return append(t.Translator.Begin(), t.notice)
}
