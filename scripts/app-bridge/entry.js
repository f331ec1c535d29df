// The host side of MCP Apps, as one script for the chat page: window.McpAppBridge holds the
// package's AppBridge and PostMessageTransport, nothing else (static/apps.js uses them).
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";
import { config } from "zod/v4/core";

// The pages' CSP has no 'unsafe-eval': zod would try `new Function` (a CSP violation logged
// in the console) before falling back to parsing without compiled validators.
config({ jitless: true });

globalThis.McpAppBridge = Object.freeze({ AppBridge, PostMessageTransport });
