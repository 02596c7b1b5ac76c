package edgeagent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgeset/edgeset/schema"
)

// The cases of Kubernetes' third_party/forked/golang/expansion tests.
func TestExpand(t *testing.T) {
	vars := map[string]string{"VAR_A": "A", "VAR_B": "B", "VAR_C": "C", "VAR_REF": "$(VAR_A)", "VAR_EMPTY": ""}
	tests := []struct{ name, in, want string }{
		{"whole string", "$(VAR_A)", "A"},
		{"repeat", "$(VAR_A)-$(VAR_A)", "A-A"},
		{"beginning", "$(VAR_A)-1", "A-1"},
		{"middle", "___$(VAR_B)___", "___B___"},
		{"end", "___$(VAR_C)", "___C"},
		{"compound", "$(VAR_A)_$(VAR_B)_$(VAR_C)", "A_B_C"},
		{"escape & expand", "$$(VAR_B)_$(VAR_A)", "$(VAR_B)_A"},
		{"compound escape", "$$(VAR_A)_$$(VAR_B)", "$(VAR_A)_$(VAR_B)"},
		{"mixed in escapes", "f000-$$VAR_A", "f000-$VAR_A"},
		{"backslash escape ignored", "foo\\$(VAR_C)bar", "foo\\Cbar"},
		{"backslash escape ignored twice", "foo\\\\$(VAR_C)bar", "foo\\\\Cbar"},
		{"lots of backslashes", "foo\\\\\\\\$(VAR_A)bar", "foo\\\\\\\\Abar"},
		{"nested var references", "$(VAR_A$(VAR_B))", "$(VAR_A$(VAR_B))"},
		{"nested var references second type", "$(VAR_A$(VAR_B)", "$(VAR_A$(VAR_B)"},
		{"value is a reference", "$(VAR_REF)", "$(VAR_A)"},
		{"value is a reference x 2", "%%$(VAR_REF)--$(VAR_REF)%%", "%%$(VAR_A)--$(VAR_A)%%"},
		{"empty var", "foo$(VAR_EMPTY)bar", "foobar"},
		{"unterminated expression", "foo$(VAR_Awhoops!", "foo$(VAR_Awhoops!"},
		{"expression without operator", "f00__(VAR_A)__", "f00__(VAR_A)__"},
		{"shell special vars pass through", "$?_boo_$!", "$?_boo_$!"},
		{"bare operators are ignored", "$VAR_A", "$VAR_A"},
		{"undefined vars are passed through", "$(VAR_DNE)", "$(VAR_DNE)"},
		{"multiple (even) operators, var undefined", "$$$$$$(BIG_MONEY)", "$$$(BIG_MONEY)"},
		{"multiple (even) operators, var defined", "$$$$$$(VAR_A)", "$$$(VAR_A)"},
		{"multiple (odd) operators, var undefined", "$$$$$$$(GOOD_ODDS)", "$$$$(GOOD_ODDS)"},
		{"multiple (odd) operators, var defined", "$$$$$$$(VAR_A)", "$$$A"},
		{"missing open expression", "$VAR_A)", "$VAR_A)"},
		{"shell syntax ignored", "${VAR_A}", "${VAR_A}"},
		{"trailing incomplete expression not consumed", "$(VAR_B)_______$(A", "B_______$(A"},
		{"trailing incomplete expression, no content, is not consumed", "$(VAR_C)_______$(", "C_______$("},
		{"operator at end of input string is preserved", "$(VAR_A)foobarzab$", "Afoobarzab$"},
		{"shell escaped incomplete expr", "foo-\\$(VAR_A", "foo-\\$(VAR_A"},
		{"lots of $( in middle", "--$($($($($--", "--$($($($($--"},
		{"lots of $( in beginning", "$($($($($--foo$(", "$($($($($--foo$("},
		{"lots of $( at end", "foo0--$($($($(", "foo0--$($($($("},
		{"escaped operators in variable names are not escaped", "$(foo$$var)", "$(foo$$var)"},
		{"newline not expanded", "\n", "\n"},
		{"empty input", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, expand(tc.in, vars))
		})
	}
}

// TestExpansionIsBounded: each variable may reference the one before it
// twice, so a template of a few hundred bytes doubles a value per entry
// (2^40 bytes after 40 entries); args may repeat a big value thousands of
// times. Building the instance must fail with an error naming the field
// instead of exhausting the device's memory.
func TestExpansionIsBounded(t *testing.T) {
	chain := func(n int) []schema.EnvVar {
		env := []schema.EnvVar{{Name: "V0", Value: strings.Repeat("x", 1024)}}
		for i := 1; i <= n; i++ {
			env = append(env, schema.EnvVar{Name: fmt.Sprintf("V%d", i), Value: fmt.Sprintf("$(V%d)$(V%d)", i-1, i-1)})
		}
		return env
	}
	for _, tc := range []struct {
		name  string
		c     schema.Container
		field string
	}{
		{"doubling env", schema.Container{Env: chain(14)}, "env["},
		{"args repeat a value", schema.Container{Env: chain(8), Args: []string{strings.Repeat("$(V8)", 8192)}}, "args[0]"},
		{"command after a big env", schema.Container{Env: chain(10), Command: []string{"$(V10)", "$(V10)", "$(V10)"}}, "command["},
		{"subPathExpr", schema.Container{Env: chain(10), VolumeMounts: []schema.VolumeMount{{Name: "v", MountPath: "/v", SubPathExpr: "$(V10)$(V10)$(V10)"}}}, "subPathExpr"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.Name, tc.c.Image = "c", "x:1"
			tmpl := schema.PodTemplateSpec{Spec: schema.PodSpec{
				Volumes:    []schema.Volume{{Name: "v", EmptyDir: &schema.EmptyDirVolumeSource{}}},
				Containers: []schema.Container{tc.c},
			}}
			_, err := BuildInstance(testContext(), tmpl)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.field)
			assert.Contains(t, err.Error(), "exceeds the limit of")
		})
	}

	t.Run("ordinary use stays well inside", func(t *testing.T) {
		tmpl := schema.PodTemplateSpec{Spec: schema.PodSpec{Containers: []schema.Container{{Name: "c", Image: "x:1",
			Env:  chain(6), // 64 KiB
			Args: []string{"--a=$(V6)", "--b=$(V6)"},
		}}}}
		_, err := BuildInstance(testContext(), tmpl)
		require.NoError(t, err)
	})
}

// TestManyVariablesFromOneBigKeyAreBounded: no expansion at all, but every
// entry copies the same large ConfigMap value into the environment.
func TestManyVariablesFromOneBigKeyAreBounded(t *testing.T) {
	ic := testContext()
	ic.ConfigMaps = map[string]schema.ConfigMap{"big": {Metadata: schema.ObjectMeta{Name: "big"}, Data: map[string]string{"v": strings.Repeat("x", 512<<10)}}}
	var env []schema.EnvVar
	for i := range 64 {
		env = append(env, schema.EnvVar{Name: fmt.Sprintf("E%d", i), ValueFrom: &schema.EnvVarSource{ConfigMapKeyRef: &schema.ConfigMapKeySelector{Name: "big", Key: "v"}}})
	}
	_, err := BuildInstance(ic, schema.PodTemplateSpec{Spec: schema.PodSpec{Containers: []schema.Container{{Name: "c", Image: "x:1", Env: env}}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exceeds the limit of")
}
