// zod's `z.locales` namespace with English only: the bridge never shows zod's messages to
// anyone, and the other 40-odd languages were 40% of the bundle (scripts/vendor_app_bridge.sh).
export { default as en } from "zod/v4/locales/en.js";
