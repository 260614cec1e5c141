// Parses multipart bodies with Node's built-in Response.formData() (undici's parser).
// Usage: node parse-formdata.mjs MANIFEST.json
// MANIFEST: [{"path": "...", "contentType": "multipart/form-data; boundary=..."}]
// Prints, for each body in order, {"parts": [{name, fileName, contentType, body (base64)}]} or {"error": "..."}.
import { readFileSync } from 'node:fs';
import { formDataParts } from './formdata-parts.mjs';

const manifest = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const results = [];
for (const { path, contentType } of manifest) {
  try {
    const parts = await formDataParts(readFileSync(path), contentType);
    results.push({ parts });
  } catch (error) {
    results.push({ error: String(error && error.message || error) });
  }
}
process.stdout.write(JSON.stringify(results));
