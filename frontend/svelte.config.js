// Svelte's compiler options for vite-plugin-svelte and svelte-check. TypeScript in <script
// lang="ts"> is stripped by Svelte 5 itself; svelte-check type-checks it in the build.
export default {
  compilerOptions: { runes: true },
};
