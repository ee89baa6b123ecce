package harness_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/internal/testutil"
	"github.com/d10ffeed/corral/sandbox"
)

func localHandle(t *testing.T) sandbox.Handle { return testutil.LocalSandbox(t) }

func TestFindAndLinkSkills(t *testing.T) {
	ctx := context.Background()
	h := localHandle(t)
	for _, f := range []string{
		".corral/skills/pack/review/SKILL.md",
		".corral/skills/pack/deep/er/test/SKILL.md",
		".corral/skills/pack/node_modules/dep/SKILL.md", // vendored: left out
		".corral/skills/pack/.git/x/SKILL.md",           // hidden below the root: left out
		".corral/skills/pack/review/notes.md",
		"tools/other/review/SKILL.md", // a second "review"
		"single/SKILL.md",
	} {
		if err := h.FS().WriteFile(ctx, f, []byte("---\nname: x\n---\n")); err != nil {
			t.Fatal(err)
		}
	}
	req := harness.Request{SkillRoots: []string{".corral/skills/pack", "tools/other", "single", "missing"}}
	skills, err := harness.FindSkills(ctx, h, req)
	if err != nil {
		t.Fatal(err)
	}
	root := h.WorkspaceRoot()
	var got []string
	for _, s := range skills {
		got = append(got, s.Name+"="+strings.TrimPrefix(s.Dir, root+"/"))
	}
	want := ".corral/skills/pack/deep/er/test,.corral/skills/pack/review,single,tools/other/review"
	var dirs []string
	for _, s := range skills {
		dirs = append(dirs, strings.TrimPrefix(s.Dir, root+"/"))
	}
	if strings.Join(dirs, ",") != want {
		t.Errorf("skills = %v", got)
	}
	names := map[string]bool{}
	for _, s := range skills {
		if names[s.Name] {
			t.Errorf("two skills named %s", s.Name)
		}
		names[s.Name] = true
	}
	if !names["review"] || !names["review-2"] || !names["test"] || !names["single"] {
		t.Errorf("names = %v", got)
	}

	dir := filepath.Join(t.TempDir(), "run", "skills")
	for range 2 { // idempotent
		if err := harness.LinkSkills(ctx, h, dir, skills); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "review-2", "SKILL.md"))
	if err != nil || !strings.Contains(string(b), "name: x") {
		t.Errorf("linked skill: %q, %v", b, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != len(skills) {
		t.Errorf("%d links for %d skills", len(ents), len(skills))
	}

	none, err := harness.FindSkills(ctx, h, harness.Request{})
	if err != nil || none != nil {
		t.Errorf("no roots: %v, %v", none, err)
	}
}

func TestSecretEnv(t *testing.T) {
	secrets, _ := sandbox.NewSecrets(map[string]string{"TOK": "t0k"})
	se := harness.NewSecretEnv(secrets)
	ref := func(n string) string { return "${" + n + "}" }
	if v, err := se.Ref("plain", ref); err != nil || v != "plain" || len(se.Env) != 0 {
		t.Errorf("a plain value stays: %q, %v, %v", v, err, se.Env)
	}
	v, err := se.Ref("Bearer ${secret:TOK}", ref)
	if err != nil || v != "${CORRAL_MCP_VALUE_0}" || se.Env["CORRAL_MCP_VALUE_0"] != "Bearer t0k" {
		t.Errorf("got %q, %v, %v", v, err, se.Env)
	}
	if _, err := se.Ref("${secret:NOPE}", ref); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Errorf("unknown secret: %v", err)
	}
}
