// The UI's entry: global styles, then the Svelte component tree (App.svelte) mounted on #app.
import "./lib/locale"; // first: a POSIX "C" locale would stop uPlot's module (lib/locale.ts)
import "./style.css";
import { mount } from "svelte";
import App from "./App.svelte";

mount(App, { target: document.getElementById("app")! });
