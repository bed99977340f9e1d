package idplugin

import "gorm.io/gorm"

// WaitInspections waits until the reads of tables that the plugin
// registered on db runs in the background (see inspect) are done.
func WaitInspections(db *gorm.DB) {
	if p, err := pluginOf(db); err == nil {
		p.inspecting.Wait()
	}
}
