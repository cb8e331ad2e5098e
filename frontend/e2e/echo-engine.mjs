#!/usr/bin/env node
// A fake engine sidecar for the UI tests: the app starts it through VKLLM_SIDECAR in place of
// `vkllm-app serve`. It speaks the part of the sidecar's protocol the app uses (sidecar/server.go,
// sidecar/supervisor.go): `serve [-m FILE] --token-file PATH`, the "vkllm serve: listening on URL"
// line on stdout, bearer-token auth, /vkllm/health, /vkllm/model, /vkllm/tokenize, /vkllm/devices,
// /vkllm/plan and a streamed /v1/chat/completions whose reply is the last user message echoed back
// piece by piece. So a test chooses the model's output by typing it, hostile markup included.
// A piece of 16 characters is a token: max_tokens cuts the echo after that many pieces
// (finish_reason "length"). When the
// last message is a reply (a Continue), it goes on echoing from where that reply ends. The user
// message "echo-system" is answered with the system prompt it received ("(no system prompt)").
import { createServer } from "node:http";
import { readFileSync } from "node:fs";

const args = process.argv.slice(2);
const tokenFile = args[args.indexOf("--token-file") + 1];
if (args[0] !== "serve" || !tokenFile) {
  console.error("echo-engine: usage: echo-engine serve [-m FILE] --token-file PATH");
  process.exit(2);
}
const token = readFileSync(tokenFile, "utf8").trim();

const model = {
  name: "echo.gguf", path: "", arch: "echo", params: 0, file_size: 0, quant: "F32", context_length: 4096,
  context: 4096, layers: 1, dim: 1, vocab_size: 256, backend: "cpu", placement: "cpu", has_chat_template: true,
  cpu_reason: "forced by a setting (the echo test engine has no GPU)",
};

function send(res, status, body) {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify(body));
}

async function readJSON(req) {
  let s = "";
  for await (const chunk of req) s += chunk;
  return s ? JSON.parse(s) : {};
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// step is the characters of one streamed piece, which counts as one token.
const step = 16;

async function chat(req, res) {
  const body = await readJSON(req);
  const msgs = body.messages ?? [];
  const user = [...msgs].reverse().find((m) => m.role === "user");
  let text = user?.content ?? "";
  if (text === "echo-system") text = msgs.find((m) => m.role === "system")?.content ?? "(no system prompt)";
  const last = msgs.at(-1);
  if (last?.role === "assistant" && text.startsWith(last.content)) text = text.slice(last.content.length);
  const max = body.max_tokens > 0 ? body.max_tokens * step : Infinity;
  const cut = text.length > max;
  if (cut) text = text.slice(0, max);
  res.writeHead(200, { "Content-Type": "text/event-stream", "Cache-Control": "no-cache" });
  const chunk = (extra) => `data: ${JSON.stringify({ id: "echo", object: "chat.completion.chunk", model: model.name, ...extra })}\n\n`;
  // Pieces of 16 characters 30 ms apart, so the UI renders half-written replies (an open fence,
  // half a tag) on the way, and a long one streams for a while.
  for (let i = 0; i < text.length; i += step) {
    if (res.destroyed) return;
    res.write(chunk({ choices: [{ index: 0, delta: { content: text.slice(i, i + step) }, finish_reason: null }] }));
    await sleep(30);
  }
  const n = Math.ceil(text.length / step);
  res.write(
    chunk({
      choices: [{ index: 0, delta: {}, finish_reason: cut ? "length" : "stop" }],
      timings: { prompt_n: n, prompt_ms: 1, prompt_per_second: 1000, predicted_n: n, predicted_ms: 30 * n, predicted_per_second: 33, ttft_ms: 1 },
      vkllm_stop_reason: cut ? "length" : "eos",
    }),
  );
  res.end("data: [DONE]\n\n");
}

const server = createServer(async (req, res) => {
  if (req.headers.authorization !== `Bearer ${token}`) return send(res, 401, { error: { message: "missing or wrong bearer token", type: "authentication_error" } });
  const route = `${req.method} ${new URL(req.url, "http://x").pathname}`;
  try {
    switch (route) {
      case "GET /vkllm/health":
        return send(res, 200, { status: "ready", pid: process.pid, model, queued: 0 });
      case "GET /vkllm/model":
      case "POST /vkllm/load":
        return send(res, 200, model);
      case "POST /vkllm/tokenize": {
        const body = await readJSON(req);
        const chars = (body.messages ?? []).reduce((n, m) => n + m.content.length, 0);
        return send(res, 200, { tokens: chars, context: model.context, too_long: false });
      }
      case "GET /vkllm/devices":
        return send(res, 200, { vulkan: [], cpu: { name: "echo" } });
      case "POST /vkllm/plan":
        return send(res, 200, {});
      case "POST /v1/chat/completions":
        return await chat(req, res);
      default:
        return send(res, 404, { error: { message: `echo-engine: no route ${route}`, type: "invalid_request_error" } });
    }
  } catch (err) {
    send(res, 500, { error: { message: String(err), type: "server_error" } });
  }
});

server.listen(0, "127.0.0.1", () => {
  console.log(`vkllm serve: listening on http://127.0.0.1:${server.address().port}`);
});
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, () => process.exit(0));
