// saveFile hands a file to the user as a download. Wails' JavaScript runtime has no save dialog
// (only its Go side does), so the window takes the same path as a browser: an object URL on a
// link with a download name.
export function saveFile(fileName: string, mimeType: string, content: string) {
  const url = URL.createObjectURL(new Blob([content], { type: `${mimeType};charset=utf-8` }));
  const a = document.createElement("a");
  a.href = url;
  a.download = fileName;
  a.rel = "noopener";
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
