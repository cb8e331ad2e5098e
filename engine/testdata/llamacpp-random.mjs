// Regenerates llamacpp-random.json: llama.cpp's logits (through node-llama-cpp 3.22.1, CPU,
// flash attention, as the shared references were made) for the random models that
// TestRandomModelsMatchLlamaCpp writes with modeltest.Small(arch, type, 21).
// Usage: node llamacpp-random.mjs DIR > llamacpp-random.json, with DIR holding
// {llama,qwen2,qwen3}-{F32,Q8_0}.gguf.
import {getLlama} from "node-llama-cpp";
const dir = process.argv[2];
const llama = await getLlama({gpu: false, build: "never", logLevel: "error"});
const tokens = [1, 262, 263, 264, 265, 270, 300];
const out = [];
for (const arch of ["llama", "qwen2", "qwen3"]) {
  for (const type of ["F32", "Q8_0"]) {
    const model = await llama.loadModel({modelPath: `${dir}/${arch}-${type}.gguf`});
    const context = await model.createContext({contextSize: 256, flashAttention: true, threads: 2});
    const seq = context.getSequence();
    const opt = {generateNext: {logits: {filter: {tokens: [0, 1, 2, 100, 200, 280], includeTop: 8}}}};
    const res = await seq.controlledEvaluate(tokens.map((t, i) => i === tokens.length - 1 ? [t, opt] : t));
    const logits = [...res[res.length - 1].next.logits.entries()].map(([id, v]) => [id, Number(v.toFixed(6))]);
    out.push({arch, type, seed: 21, tokens, logits});
    await context.dispose();
    await model.dispose();
  }
}
console.log(JSON.stringify(out, null, 1));
