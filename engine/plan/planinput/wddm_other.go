//go:build !windows

package planinput

// PlatformWDDM: outside Windows no WDDM pages video memory behind the application's back.
const PlatformWDDM = false
