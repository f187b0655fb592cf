package io.github.turnstilelock.turnstile;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;

/**
 * Runs the client's tests without a test library: every method named test*
 * of the classes below, each on a new instance, and prints one line a test
 * and the summary "N passed, N failed". Arguments keep only the tests whose
 * Class.method name contains one of them. Exit status 1 if any failed.
 */
public final class TestRunner {
    private static final Class<?>[] SUITES = {UnitTest.class, LockTest.class, FailureTest.class, ElectionTest.class};

    private TestRunner() {
    }

    public static void main(String[] args) throws Exception {
        int passed = 0;
        int failed = 0;
        List<String> failures = new ArrayList<>();
        long start = System.nanoTime();
        for (Class<?> suite : SUITES) {
            Method[] ms = suite.getDeclaredMethods();
            Arrays.sort(ms, Comparator.comparing(Method::getName));
            for (Method m : ms) {
                String name = suite.getSimpleName() + "." + m.getName();
                if (!m.getName().startsWith("test") || m.getParameterCount() != 0 || Modifier.isStatic(m.getModifiers())) {
                    continue;
                }
                if (args.length > 0 && Arrays.stream(args).noneMatch(name::contains)) {
                    continue;
                }
                long t0 = System.nanoTime();
                try {
                    m.setAccessible(true);
                    m.invoke(suite.getDeclaredConstructor().newInstance());
                    passed++;
                    System.out.printf("ok   %s (%.2f s)%n", name, (System.nanoTime() - t0) / 1e9);
                } catch (InvocationTargetException e) {
                    failed++;
                    failures.add(name);
                    System.out.printf("FAIL %s (%.2f s)%n", name, (System.nanoTime() - t0) / 1e9);
                    e.getCause().printStackTrace(System.out);
                }
                System.out.flush();
            }
        }
        System.out.printf("%d passed, %d failed in %.1f s%n", passed, failed, (System.nanoTime() - start) / 1e9);
        if (failed > 0) {
            System.out.println("failed: " + String.join(", ", failures));
            System.exit(1);
        }
        System.exit(0);
    }
}
