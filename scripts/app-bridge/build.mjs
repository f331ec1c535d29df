// esbuild of entry.js into one minified IIFE (run by scripts/vendor_app_bridge.sh).
import { build } from "esbuild";
const [outfile, banner] = process.argv.slice(2);
const localesStub = new URL("./zod-locales.js", import.meta.url).pathname;

const englishOnly = {
  name: "zod-english-only",
  setup(b) {
    // zod/v4/classic/external.js: `export * as locales from "../locales/index.js"`.
    b.onResolve({ filter: /\/locales\/index\.js$/ }, (args) =>
      args.importer.includes("/zod/") ? { path: localesStub } : undefined);
  },
};

await build({
  entryPoints: [new URL("./entry.js", import.meta.url).pathname],
  bundle: true,
  minify: true,
  format: "iife",
  target: "es2020",
  legalComments: "none",
  banner: { js: banner },
  plugins: [englishOnly],
  outfile,
});
