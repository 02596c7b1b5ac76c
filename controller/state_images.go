package controller

import "github.com/edgeset/edgeset/schema"

// nodeTemplates returns the templates of the revisions node's current
// desired state references.
func (fs *fleetState) nodeTemplates(node string) []schema.PodTemplateSpec {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	var out []schema.PodTemplateSpec
	for in := range referenced(fs.current[node]) {
		if rev, ok := fs.revisions[in.Revision]; ok {
			out = append(out, rev.Template)
		}
	}
	return out
}
