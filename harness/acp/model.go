package acp

import (
	"fmt"
	"strings"

	acpsdk "github.com/coder/acp-go-sdk"
)

// setModel selects the run's model (harness.Request.Model) in session sid,
// the way the agent offers it in its session/new or session/load answer:
// through its session config option of category "model"
// (session/set_config_option), or else through the models it lists
// (session/set_model, still unstable in ACP). A model the agent does not
// offer, or an agent that offers no choice, fails the run naming what it
// offers, before the prompt.
func (s *session) setModel(sid acpsdk.SessionId, configs []acpsdk.SessionConfigOption, models *acpsdk.SessionModelState) *record {
	model := s.req.Model
	fail := func(format string, args ...any) *record {
		return &record{Kind: recError, Code: "acp-model", Message: fmt.Sprintf(format, args...)}
	}
	for _, c := range configs {
		sel := c.Select
		if sel == nil || sel.Category == nil || *sel.Category != acpsdk.SessionConfigOptionCategoryModel {
			continue
		}
		values := selectValues(sel.Options)
		found := false
		for _, v := range values {
			found = found || v == model
		}
		if !found {
			return fail("the agent does not offer the model %q (it offers: %s)", model, offered(values, model))
		}
		if _, err := s.conn.SetSessionConfigOption(s.ctx, acpsdk.SetSessionConfigOptionRequest{ValueId: &acpsdk.SetSessionConfigOptionValueId{
			SessionId: sid, ConfigId: sel.Id, Value: acpsdk.SessionConfigValueId(model)}}); err != nil {
			return s.failure("session/set_config_option", err)
		}
		return nil
	}
	if models == nil || len(models.AvailableModels) == 0 {
		return fail("the agent offers no choice of model (no model config option, no models in its session): leave the model to the agent's own configuration")
	}
	var ids []string
	for _, m := range models.AvailableModels {
		if string(m.ModelId) == model {
			if _, err := s.conn.UnstableSetSessionModel(s.ctx, acpsdk.UnstableSetSessionModelRequest{SessionId: sid, ModelId: acpsdk.UnstableModelId(model)}); err != nil {
				return s.failure("session/set_model", err)
			}
			return nil
		}
		ids = append(ids, string(m.ModelId))
	}
	return fail("the agent does not offer the model %q (it offers: %s)", model, offered(ids, model))
}

// selectValues lists a select option's values, grouped or not.
func selectValues(o acpsdk.SessionConfigSelectOptions) []string {
	var out []string
	if o.Ungrouped != nil {
		for _, v := range *o.Ungrouped {
			out = append(out, string(v.Value))
		}
	}
	if o.Grouped != nil {
		for _, g := range *o.Grouped {
			for _, v := range g.Options {
				out = append(out, string(v.Value))
			}
		}
	}
	return out
}

// offered lists ids for an error: those sharing the asked model's
// provider prefix ("corral/" of "corral/x") first, at most 12 in all.
func offered(ids []string, asked string) string {
	prefix, _, ok := strings.Cut(asked, "/")
	var near, rest []string
	for _, id := range ids {
		if ok && strings.HasPrefix(id, prefix+"/") {
			near = append(near, id)
		} else {
			rest = append(rest, id)
		}
	}
	all := append(near, rest...)
	const most = 12
	if len(all) <= most {
		return strings.Join(all, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(all[:most], ", "), len(all)-most)
}
