#!/usr/bin/env bash
# Builds the Java client with the JDK alone (javac, jar): no registry, no
# build tool.
#
#   clients/java/build.sh [OUT]     default OUT: clients/java/build
#
# OUT/classes and OUT/turnstile-client.jar: the client; OUT/test-classes:
# its tests (run by clients/test.sh); OUT/example-classes: the examples.
# The public API's Javadoc is checked (-Xdoclint): a missing comment fails
# the build. javac runs on C1 alone with the serial collector: for a build
# this small that halves its CPU.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/build}
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -rf "$out/classes" "$out/test-classes" "$out/example-classes"
javac -J-XX:TieredStopAtLevel=1 -J-XX:+UseSerialGC --release 17 -Xlint:all -Werror -Xdoclint:all/protected -encoding UTF-8 -d "$out/classes" \
	$(find "$here/src/main/java" -name '*.java' | sort)
jar --create --file "$out/turnstile-client.jar" -C "$out/classes" .
javac -J-XX:TieredStopAtLevel=1 -J-XX:+UseSerialGC --release 17 -Xlint:all -Werror -encoding UTF-8 -cp "$out/classes" -d "$out/test-classes" \
	$(find "$here/src/test/java" -name '*.java' | sort)
javac -J-XX:TieredStopAtLevel=1 -J-XX:+UseSerialGC --release 17 -Xlint:all -Werror -encoding UTF-8 -cp "$out/classes" -d "$out/example-classes" \
	$(find "$here/examples" -name '*.java' | sort)
