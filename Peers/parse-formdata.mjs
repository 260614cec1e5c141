// Parses multipart bodies with Node's built-in Response.formData() (undici's parser).
// Usage: node parse-formdata.mjs MANIFEST.json
// MANIFEST: [{"path": "...", "contentType": "multipart/form-data; boundary=..."}]
// Prints, for each body in order, {"parts": [{name, fileName, contentType, body (base64)}]} or {"error": "..."}.
import { readFileSync } from 'node:fs';

const manifest = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const results = [];
for (const { path, contentType } of manifest) {
  try {
    const form = await new Response(readFileSync(path), { headers: { 'content-type': contentType } }).formData();
    const parts = [];
    for (const [name, value] of form) {
      if (typeof value === 'string') {
        parts.push({ name, body: Buffer.from(value, 'utf8').toString('base64') });
      } else {
        const body = Buffer.from(await value.arrayBuffer()).toString('base64');
        parts.push({ name, fileName: value.name, contentType: value.type, body });
      }
    }
    results.push({ parts });
  } catch (error) {
    results.push({ error: String(error && error.message || error) });
  }
}
process.stdout.write(JSON.stringify(results));
