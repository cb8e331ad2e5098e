// Assistant replies as markdown: marked parses, highlight.js colours fenced code, DOMPurify
// sanitizes the result. Model output is untrusted text, so whatever it writes can never run
// script, fetch a resource or navigate the window:
//   - raw HTML in the markdown is shown as literal text, never parsed as markup;
//   - images render as their alt text, so nothing is fetched;
//   - links keep only http, https and mailto targets, and a click opens them outside the app;
//   - DOMPurify then removes anything that still slipped through (script, iframe, object, embed,
//     style, form, img, on* and style attributes).
import { Marked, type Tokens } from "marked";
import DOMPurify from "dompurify";
import "highlight.js/styles/github-dark.css";
import hljs from "highlight.js/lib/core";
import bash from "highlight.js/lib/languages/bash";
import c from "highlight.js/lib/languages/c";
import cpp from "highlight.js/lib/languages/cpp";
import css from "highlight.js/lib/languages/css";
import go from "highlight.js/lib/languages/go";
import javascript from "highlight.js/lib/languages/javascript";
import json from "highlight.js/lib/languages/json";
import python from "highlight.js/lib/languages/python";
import rust from "highlight.js/lib/languages/rust";
import sql from "highlight.js/lib/languages/sql";
import typescript from "highlight.js/lib/languages/typescript";
import xml from "highlight.js/lib/languages/xml";
import yaml from "highlight.js/lib/languages/yaml";

// The core build with a few common languages keeps the bundle small; an unknown fence language
// renders as plain (escaped) code.
for (const [name, lang] of Object.entries({ bash, c, cpp, css, go, javascript, json, python, rust, sql, typescript, xml, yaml })) {
  hljs.registerLanguage(name, lang);
}

function escapeHTML(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&#39;");
}

// safeHref is the link target kept, or "" when the scheme is not http, https or mailto.
export function safeHref(href: string): string {
  const t = href.trim();
  return /^(https?:\/\/|mailto:)/i.test(t) ? t : "";
}

const md = new Marked({
  gfm: true,
  breaks: true,
  renderer: {
    code({ text, lang }: Tokens.Code): string {
      const language = (lang ?? "").trim().split(/\s+/)[0].toLowerCase();
      const known = language !== "" && hljs.getLanguage(language) !== undefined;
      const body = known ? hljs.highlight(text, { language, ignoreIllegals: true }).value : escapeHTML(text);
      const cls = known ? `hljs language-${escapeHTML(language)}` : "hljs";
      return `<pre><code class="${cls}">${body}</code></pre>\n`;
    },
    html({ text }: Tokens.HTML | Tokens.Tag): string {
      return escapeHTML(text);
    },
    image({ text }: Tokens.Image): string {
      return text ? `<span class="md-image">[image: ${escapeHTML(text)}]</span>` : "";
    },
  },
});

const forbidTags = ["script", "iframe", "frame", "object", "embed", "style", "link", "meta", "base", "form", "input", "button", "textarea", "select", "img", "picture", "source", "video", "audio", "svg", "math"];

let hooked = false;

function hookPurify() {
  if (hooked) return;
  hooked = true;
  DOMPurify.addHook("afterSanitizeAttributes", (node) => {
    for (const a of Array.from(node.attributes ?? [])) {
      if (/^on/i.test(a.name)) node.removeAttribute(a.name);
    }
    if (node.nodeName === "A") {
      const href = safeHref(node.getAttribute("href") ?? "");
      if (href) {
        node.setAttribute("href", href);
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer");
      } else {
        node.removeAttribute("href");
      }
    }
  });
}

// renderMarkdownHTML returns the sanitized HTML of a reply.
export function renderMarkdownHTML(src: string): string {
  hookPurify();
  const html = md.parse(src, { async: false });
  return DOMPurify.sanitize(html, {
    USE_PROFILES: { html: true },
    FORBID_TAGS: forbidTags,
    FORBID_ATTR: ["style", "srcset", "action", "formaction", "xlink:href"],
    ALLOW_DATA_ATTR: false,
  });
}

// copyText puts text on the clipboard: the async API where the page may use it, else a hidden
// textarea and execCommand (WebKitGTK without a secure context).
export async function copyText(text: string): Promise<void> {
  try {
    await navigator.clipboard.writeText(text);
    return;
  } catch {
    const ta = document.createElement("textarea");
    ta.value = text;
    ta.setAttribute("readonly", "");
    ta.style.position = "fixed";
    ta.style.opacity = "0";
    document.body.append(ta);
    ta.select();
    const ok = document.execCommand("copy");
    ta.remove();
    if (!ok) throw new Error("the clipboard refused the text");
  }
}

// renderMarkdown fills el with the rendered reply and puts a copy button on each code block.
export function renderMarkdown(el: HTMLElement, src: string): void {
  el.innerHTML = renderMarkdownHTML(src);
  for (const pre of Array.from(el.querySelectorAll("pre"))) {
    const code = pre.querySelector("code");
    const btn = document.createElement("button");
    btn.type = "button";
    btn.className = "copy-code";
    btn.textContent = "Copy";
    btn.addEventListener("click", () => {
      copyText(code?.textContent ?? "").then(
        () => (btn.textContent = "Copied"),
        () => (btn.textContent = "Copy failed"),
      );
      setTimeout(() => (btn.textContent = "Copy"), 1500);
    });
    pre.prepend(btn);
  }
}

interface LinkOpener {
  runtime?: { BrowserOpenURL?: (url: string) => void };
}

// guardLinks keeps a click on a reply's link from navigating the app window: the Wails window
// hands it to the system browser, a plain browser opens a new tab without an opener.
export function guardLinks(root: HTMLElement): void {
  root.addEventListener("click", (e) => {
    const a = (e.target as Element | null)?.closest?.(".md a");
    if (!a) return;
    e.preventDefault();
    const href = safeHref(a.getAttribute("href") ?? "");
    if (!href) return;
    const w = window as unknown as LinkOpener;
    if (w.runtime?.BrowserOpenURL) w.runtime.BrowserOpenURL(href);
    else window.open(href, "_blank", "noopener,noreferrer");
  });
}
