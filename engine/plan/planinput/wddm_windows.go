package planinput

// PlatformWDDM: Windows drives GPUs through WDDM, which pages video memory behind the
// application's back, so the plan keeps the larger WDDM headroom.
const PlatformWDDM = true
