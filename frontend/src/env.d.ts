// Vite bundles CSS imported for its side effect.
declare module "*.css";
