package run_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/d10ffeed/corral/harness"
	"github.com/d10ffeed/corral/harness/command"
	"github.com/d10ffeed/corral/provider/local"
	"github.com/d10ffeed/corral/run"
	"github.com/d10ffeed/corral/sandbox"
	"github.com/d10ffeed/corral/store"
	"github.com/d10ffeed/corral/store/sqlitestore"
)

// tableText returns, per table of the SQLite database at path, every
// value of every row as text, one string per row.
func tableText(t *testing.T, path string) map[string][]string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	out := map[string][]string{}
	for _, tb := range tables {
		rs, err := db.Query(`SELECT * FROM "` + tb + `"`)
		if err != nil {
			t.Fatal(err)
		}
		cols, _ := rs.Columns()
		for rs.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rs.Scan(ptrs...); err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			for i, v := range vals {
				if bs, ok := v.([]byte); ok {
					v = string(bs)
				}
				fmt.Fprintf(&b, "%s=%v ", cols[i], v)
			}
			out[tb] = append(out[tb], b.String())
		}
		rs.Close()
	}
	return out
}

// TestRetentionModes runs one agent per retention mode on SQLite, lets the
// retention pass run past its grace (an injected clock), then reads every
// table of the database: mode all keeps the prompt and the output, mode
// sandbox keeps the run's record, ids and event types but no text, mode
// none keeps nothing of the run.
func TestRetentionModes(t *testing.T) {
	const secret = "acme-secret-6f1c"
	p, err := local.New(local.Options{BaseDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	dbPath := filepath.Join(t.TempDir(), "corral.db")
	st, err := sqlitestore.Open(context.Background(), dbPath, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var skew atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	defs := []*sandbox.Definition{{ID: "d", Provider: p}, {ID: "private", Provider: p, Retention: "none"}}
	r, err := run.New(st, defs, []harness.Harness{command.Harness{}}, run.Options{LeaseTTL: 2 * time.Second, PollInterval: 50 * time.Millisecond, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	c := ctx(t)

	ids := map[string]string{}
	for _, tc := range []struct {
		name, def string
		mode      store.Retention
	}{
		{"all", "d", ""}, {"sandbox", "d", store.RetainSandbox}, {"none", "d", store.RetainNone},
		{"definition-none", "private", ""}, {"request-cannot-keep-more", "private", store.RetainAll},
	} {
		rec, err := r.Start(c, run.StartRequest{Definition: tc.def, Thread: "th-" + tc.name, Harness: command.Name,
			Prompt: "echo said " + secret + "; echo " + secret + " >&2; exit 3", Retention: tc.mode})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(c, rec.ID); err != nil {
			t.Fatal(err)
		}
		ids[tc.name] = rec.ID
	}
	// Within the grace, nothing is forgotten: a client still reading the
	// run's last events finds them.
	rep, err := r.Forget(c, run.ForgetOptions{Grace: time.Minute})
	if err != nil || rep.Forgotten != 0 {
		t.Fatalf("Forget within the grace = %+v, %v: want nothing forgotten", rep, err)
	}
	skew.Store(int64(time.Hour))
	rep, err = r.Forget(c, run.ForgetOptions{Grace: time.Minute})
	if err != nil || rep.Forgotten != 4 || rep.Failed != 0 {
		t.Fatalf("Forget after the grace = %+v, %v: want 4 forgotten (sandbox, none and the two private runs)", rep, err)
	}
	if again, err := r.Forget(c, run.ForgetOptions{Grace: time.Minute}); err != nil || again.Forgotten != 0 {
		t.Fatalf("a second pass = %+v, %v: want nothing left to forget", again, err)
	}

	tables := tableText(t, dbPath)
	rowsOf := func(table, id string) []string {
		var out []string
		for _, row := range tables[table] {
			if strings.Contains(row, id) {
				out = append(out, row)
			}
		}
		return out
	}
	for _, name := range []string{"all", "sandbox", "none", "definition-none", "request-cannot-keep-more"} {
		id := ids[name]
		runRows, evRows := rowsOf("corral_runs", id), rowsOf("corral_run_events", id)
		text := strings.Join(append(runRows, evRows...), "\n")
		switch name {
		case "all":
			if len(runRows) != 1 || !strings.Contains(text, "prompt=echo said "+secret) || !strings.Contains(strings.Join(evRows, ""), "said "+secret) {
				t.Errorf("mode all: want the prompt and the output kept; run rows %d, events %d", len(runRows), len(evRows))
			}
		case "sandbox":
			if len(runRows) != 1 || len(evRows) == 0 {
				t.Fatalf("mode sandbox: want the run and its events' rows; got %d and %d", len(runRows), len(evRows))
			}
			if strings.Contains(text, secret) {
				t.Errorf("mode sandbox: the secret is still in the tables:\n%s", text)
			}
			if !strings.Contains(runRows[0], "exit_code=3") || !strings.Contains(runRows[0], "status=failed") {
				t.Errorf("mode sandbox: the run's outcome is gone: %s", runRows[0])
			}
			if !strings.Contains(text, "type=RUN_STARTED") || !strings.Contains(text, "type=RUN_ERROR") {
				t.Errorf("mode sandbox: the event types are gone:\n%s", text)
			}
		default: // none, by request or by definition
			if len(runRows) != 0 || len(evRows) != 0 {
				t.Errorf("mode %s: the run left %d run rows and %d event rows:\n%s", name, len(runRows), len(evRows), text)
			}
		}
	}
	// Only the run of mode all holds the secret anywhere in the database.
	for table, rows := range tables {
		for _, row := range rows {
			if strings.Contains(row, secret) && !strings.Contains(row, ids["all"]) {
				t.Errorf("table %s holds the secret outside the run of mode all: %s", table, row)
			}
		}
	}
	t.Logf("tables read: %d; run rows %d, event rows %d", len(tables), len(tables["corral_runs"]), len(tables["corral_run_events"]))
}

// TestRetentionRefusesUnknownMode: a mode that is none of the three is
// refused before anything is stored.
func TestRetentionRefusesUnknownMode(t *testing.T) {
	e := newEnv(t)
	r := e.runner(t, run.Options{})
	_, err := r.Start(ctx(t), run.StartRequest{Definition: "d", Thread: "t", Harness: command.Name, Prompt: "true", Retention: "forever"})
	if sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Fatalf("Start with retention forever: %v, want InvalidArgument", err)
	}
	if runs, _ := e.st.ListRuns(ctx(t), store.RunFilter{}); len(runs) != 0 {
		t.Fatalf("a refused start stored %d runs", len(runs))
	}
	if _, err := run.New(e.st, nil, nil, run.Options{Retention: "forever"}); sandbox.CodeOf(err) != sandbox.InvalidArgument {
		t.Fatalf("run.New with retention forever: %v", err)
	}
}

func TestStrictest(t *testing.T) {
	for _, tc := range []struct {
		in   []store.Retention
		want store.Retention
	}{
		{nil, ""}, {[]store.Retention{"", store.RetainAll}, ""},
		{[]store.Retention{store.RetainAll, store.RetainSandbox}, store.RetainSandbox},
		{[]store.Retention{store.RetainNone, store.RetainSandbox, ""}, store.RetainNone},
	} {
		if got := run.Strictest(tc.in...); got != tc.want {
			t.Errorf("Strictest(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
