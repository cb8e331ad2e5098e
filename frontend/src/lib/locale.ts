// WebKitGTK reports the process's POSIX locale as navigator.language, so under LANG=C (or with no
// LANG at all, as in containers and CI) the page sees "C", which is no BCP 47 tag: Intl rejects it
// with a RangeError. uPlot builds an Intl.NumberFormat from navigator.language when its module
// loads, so that one error would stop the whole UI before it draws. This module runs before any
// other (main.ts imports it first) and, when the reported language is not a tag Intl accepts,
// reports "en-US" instead, the language the UI is written in.

export const fallbackLanguage = "en-US";

/** acceptedByIntl says whether Intl takes tag as a locale. */
export function acceptedByIntl(tag: string | undefined): boolean {
  if (!tag) return false;
  try {
    return Intl.getCanonicalLocales(tag).length > 0;
  } catch {
    return false;
  }
}

/** settleLanguage replaces an unusable navigator.language (and languages) with fallbackLanguage; it
 * returns the language the page ends up with. */
export function settleLanguage(nav: Navigator = navigator): string {
  if (acceptedByIntl(nav.language)) return nav.language;
  const proto = Object.getPrototypeOf(nav);
  Object.defineProperty(proto, "language", { configurable: true, get: () => fallbackLanguage });
  Object.defineProperty(proto, "languages", { configurable: true, get: () => [fallbackLanguage] });
  return nav.language;
}

settleLanguage();
