package main

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/edgeset/edgeset/internal/cliconfig"
	"github.com/spf13/pflag"
)

// TestConfigurationDocReproducesAgentYAML keeps docs/configuration.md in
// step with configs/agent.yaml, the reference of every agent key.
func TestConfigurationDocReproducesAgentYAML(t *testing.T) {
	file, err := os.ReadFile("../../configs/agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), strings.TrimSpace(string(file))) {
		t.Fatal("docs/configuration.md must reproduce configs/agent.yaml (copy the file into its agent section)")
	}
}

// TestDocumentedAgentConfigLoads: configs/agent.yaml loads through the
// --config path with no unknown key, and every flag is documented in it.
func TestDocumentedAgentConfigLoads(t *testing.T) {
	cmd := newRootCmd(io.Discard)
	v := cliconfig.New(envNames)
	if err := v.BindPFlags(cmd.Flags()); err != nil {
		t.Fatal(err)
	}
	v.Set("config", "../../configs/agent.yaml")
	if _, _, err := loadConfig(v); err != nil {
		t.Fatalf("configs/agent.yaml: %v", err)
	}
	file, err := os.ReadFile("../../configs/agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "config" || f.Name == "help" || f.Name == "version" {
			return
		}
		if !strings.Contains(string(file), f.Name+":") {
			t.Errorf("flag --%s is not documented in configs/agent.yaml", f.Name)
		}
	})
}
