#!/bin/sh
# Make a throwaway CA, a server certificate for 127.0.0.1 and a client
# certificate in DIR, for the scenario's TLS-only TCP socket on loopback.
set -eu
dir=$1
mkdir -p "$dir"
cd "$dir"
openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=gpufleet-test-ca -keyout ca-key.pem -out ca.pem 2>/dev/null
for who in server client; do
    openssl req -newkey rsa:2048 -nodes -subj "/CN=$who" -keyout "$who-key.pem" -out "$who.csr" 2>/dev/null
done
printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >server.ext
printf 'extendedKeyUsage=clientAuth\n' >client.ext
for who in server client; do
    openssl x509 -req -days 2 -in "$who.csr" -CA ca.pem -CAkey ca-key.pem -CAcreateserial \
        -extfile "$who.ext" -out "$who-cert.pem" 2>/dev/null
done
