// Prints the local broker's request and topic counters as one JSON object.
// Run as a single-file program: java BrokerCounts.java <broker pid>
// It attaches to the broker's JVM (same user) and reads its JMX meters' cumulative counts:
// requests by API (the broker's own included), and fetch requests, produce requests and
// records in by topic.
import com.sun.tools.attach.VirtualMachine;
import java.lang.management.ManagementFactory;
import java.util.Map;
import java.util.TreeMap;
import javax.management.MBeanServerConnection;
import javax.management.ObjectName;
import javax.management.remote.JMXConnector;
import javax.management.remote.JMXConnectorFactory;
import javax.management.remote.JMXServiceURL;

public class BrokerCounts {
    public static void main(String[] args) throws Exception {
        VirtualMachine vm = VirtualMachine.attach(args[0]);
        String url = vm.startLocalManagementAgent();
        try (JMXConnector connector = JMXConnectorFactory.connect(new JMXServiceURL(url))) {
            MBeanServerConnection server = connector.getMBeanServerConnection();
            StringBuilder out = new StringBuilder("{");
            out.append("\"requests\":").append(counts(server, "kafka.network:type=RequestMetrics,name=RequestsPerSec,*", "request"));
            for (String name : new String[] {"TotalFetchRequestsPerSec", "TotalProduceRequestsPerSec", "MessagesInPerSec"}) {
                out.append(",\"").append(name).append("\":")
                   .append(counts(server, "kafka.server:type=BrokerTopicMetrics,name=" + name + ",topic=*", "topic"));
            }
            System.out.println(out.append("}"));
        } finally {
            vm.detach();
        }
    }

    static String counts(MBeanServerConnection server, String pattern, String tag) throws Exception {
        Map<String, Long> sums = new TreeMap<>();
        for (ObjectName name : server.queryNames(new ObjectName(pattern), null)) {
            long count = ((Number) server.getAttribute(name, "Count")).longValue();
            sums.merge(name.getKeyProperty(tag), count, Long::sum);
        }
        StringBuilder out = new StringBuilder("{");
        for (Map.Entry<String, Long> e : sums.entrySet()) {
            if (out.length() > 1) out.append(",");
            out.append("\"").append(e.getKey()).append("\":").append(e.getValue());
        }
        return out.append("}").toString();
    }
}
