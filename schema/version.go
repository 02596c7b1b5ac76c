package schema

// Version is the edgeset release, set at build time with
// -ldflags "-X github.com/edgeset/edgeset/schema.Version=...".
var Version = "dev"
